"""The package a user installs without a clone: `python -m build` makes an sdist and a wheel that carry the shipped
checkpoints (and not the resume state in checkpoints/in-progress/), and a fresh virtual environment with only that
wheel installed loads a checkpoint by name from a folder outside the clone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
import torch

from latentcode.rundir.checkpoint import load_run

REPO = Path(__file__).resolve().parents[2]
CHECKPOINTS = REPO / "checkpoints"
SHIPPED = sorted(p.name for p in CHECKPOINTS.glob("*") if (p / "shipped.json").is_file()) if CHECKPOINTS.is_dir() else []
PROBE_NAME = "fuzzy_logic-hyla"


def _copy_source(dest: Path) -> Path:
    """The files a build reads, copied so that the build writes nothing into the checkout."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "runs")
    for name in ("setup.py", "setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    for name in ("latentcode", "probes", "checkpoints"):
        shutil.copytree(REPO / name, dest / name, ignore=skip)
    return dest


def _run(args: list, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.slow
@pytest.mark.skipif(PROBE_NAME not in SHIPPED, reason=f"no checkpoints/{PROBE_NAME} (not a clone)")
def test_the_wheel_carries_the_shipped_checkpoints_and_loads_one_outside_the_clone(tmp_path):
    (tmp_path / "source").mkdir()
    source = _copy_source(tmp_path / "source")
    dist = tmp_path / "dist"
    # the sdist first, then the wheel built from the unpacked sdist: the route pip and PyPI users take
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, source])
    (wheel,) = dist.glob("latentcode-*.whl")
    (sdist,) = dist.glob("latentcode-*.tar.gz")

    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    in_wheel = {n.split("/")[2] for n in names if n.startswith("latentcode/_checkpoints/") and n.count("/") == 3}
    assert sorted(in_wheel) == SHIPPED
    assert not [n for n in names if n.startswith("latentcode/_checkpoints/") and ("in-progress" in n or "train_state" in n)]
    for name in SHIPPED:
        expected = sorted(p.name for p in (CHECKPOINTS / name).iterdir())
        assert sorted(n.rsplit("/", 1)[1] for n in names if n.startswith(f"latentcode/_checkpoints/{name}/")) == expected
    with tarfile.open(sdist) as archive:
        assert not [n for n in archive.getnames() if "in-progress" in n]

    # a fresh environment holding only the wheel (installed by this pip into it, so nothing outside it is touched);
    # then torch and the other dependencies are lent from this interpreter's site-packages by a .pth file, which
    # appends them after the venv's own (the checkout's editable install is not imported: its hook is not run)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "--quiet", wheel])
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    parents = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "zz_parent_site.pth").write_text("\n".join(parents) + "\n")

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("LATENTCODE_CHECKPOINTS", "PYTHONPATH")}
    probe = f"""
import json, torch, latentcode
from latentcode.rundir.pretrained import checkpoints_dir, list_pretrained
run = latentcode.load_pretrained({PROBE_NAME!r})
x = torch.randn(4, run.model.cfg.seq_len, run.model.cfg.d_in, generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    out = run.model.eval()(x)
print(json.dumps({{"module": latentcode.__file__, "folder": str(checkpoints_dir()), "names": list_pretrained(),
                  "step": run.step, "out": out.flatten().tolist()}}))
"""
    got = json.loads(_run([python, "-c", probe], cwd=outside, env=env).stdout.strip().splitlines()[-1])
    assert Path(got["module"]).is_relative_to(site)
    assert Path(got["folder"]) == site / "latentcode" / "_checkpoints"
    assert got["names"] == SHIPPED
    # the same weights as the checkout's copy, read here without the resolver under test
    reference = load_run(CHECKPOINTS / PROBE_NAME)
    x = torch.randn(4, reference.model.cfg.seq_len, reference.model.cfg.d_in, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = reference.model.eval()(x).flatten()
    assert got["step"] == reference.step
    torch.testing.assert_close(torch.tensor(got["out"]), expected, rtol=0, atol=0)

    # the console script of the wheel lists them too
    script = venv / ("Scripts/latentcode.exe" if os.name == "nt" else "bin/latentcode")
    listing = _run([script, "pretrained"], cwd=outside, env=env).stdout
    assert all(name in listing for name in SHIPPED)
