import matplotlib
import pytest
import torch

matplotlib.use("Agg")
# Tests run tiny models: one intra-op thread is faster than two for them, and steadier on a shared 2-core machine.
torch.set_num_threads(1)


def pytest_addoption(parser):
    parser.addoption("--device", default=None, help="torch device for tests (default: cuda if available, else cpu)")


@pytest.fixture(scope="session")
def device(request) -> str:
    chosen = request.config.getoption("--device")
    if chosen is None:
        chosen = "cuda" if torch.cuda.is_available() else "cpu"
    return chosen


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")
