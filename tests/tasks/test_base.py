"""The task registry, the `Task` protocol and `Batch`, exercised through both registered tasks."""

import json

import pytest
import torch

from latentcode.tasks import (
    TASKS,
    Batch,
    FuzzyLogic,
    SRaven,
    Task,
    get_task,
    register_task,
    task_from_dict,
)

TASK_PARAMS = [
    pytest.param("fuzzy_logic", {"n_variables": 3, "seed": 2}, id="fuzzy_logic"),
    pytest.param("sraven", {"n_features": 3, "frac_ood": 0.3, "seed": 1}, id="sraven"),
]


def test_registry_holds_both_tasks():
    assert TASKS["fuzzy_logic"] is FuzzyLogic
    assert TASKS["sraven"] is SRaven


def test_unknown_task_name_lists_the_valid_names():
    with pytest.raises(ValueError, match="'sravn'.*valid tasks: fuzzy_logic, sraven"):
        get_task("sravn")


@pytest.mark.parametrize(
    "name, field",
    [pytest.param("fuzzy_logic", "n_variable", id="fuzzy_logic"), pytest.param("sraven", "n_feature", id="sraven")],
)
def test_unknown_parameter_lists_the_valid_fields(name, field):
    with pytest.raises(ValueError, match=f"'{field}'.*valid: .*seed"):
        get_task(name, **{field: 3})


def test_registering_a_name_twice_fails():
    with pytest.raises(ValueError, match="already registered"):
        register_task("sraven")(type("Other", (), {}))
    assert TASKS["sraven"] is SRaven


def test_from_dict_rejects_an_unknown_task_name():
    with pytest.raises(ValueError, match="'nope'.*valid tasks: fuzzy_logic, sraven"):
        task_from_dict({"name": "nope", "params": {}, "compositions": {}})


@pytest.mark.parametrize("name, params", TASK_PARAMS)
def test_tasks_follow_the_protocol(name, params):
    task = get_task(name, **params)
    assert isinstance(task, Task)
    assert task.metric_name in {"r2", "acc"}
    assert set(task.splits) >= {"train", "test", "ood"}
    batch = task.sample(5, "ood", seed=0)
    assert batch.x.shape == (5, task.seq_len, task.d_in) and batch.split == "ood"
    outputs = torch.zeros(5, task.seq_len, task.d_out)
    assert task.loss(outputs, batch).shape == ()
    assert task.metric_name in task.metrics(outputs, batch)
    assert task.predict(outputs).shape[0] == 5


@pytest.mark.parametrize("name, params", TASK_PARAMS)
def test_json_round_trip_through_the_registry_keeps_the_split(name, params):
    task = get_task(name, **params)
    restored = task_from_dict(json.loads(json.dumps(task.to_dict())))
    assert type(restored) is type(task) and restored.config == task.config
    for split in task.splits:
        assert (restored.compositions(split) == task.compositions(split)).all()
    a, b = task.sample(16, "ood", seed=3), restored.sample(16, "ood", seed=3)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)


def test_batch_len_and_to_move_every_field():
    batch = Batch(x=torch.zeros(3, 2, 1), y=torch.zeros(3), labels={"a": torch.ones(3, 4)}, split="ood")
    moved = batch.to("cpu")
    assert len(moved) == 3 and moved.split == "ood" and torch.equal(moved.labels["a"], torch.ones(3, 4))
