"""BFCL v4 multi-turn tasks (`bfcl:<BFCL id>`), read from the `bfcl-eval` package's data files.

Categories: multi_turn_base, multi_turn_miss_func, multi_turn_miss_param, multi_turn_long_context (200 tasks each),
ids exactly BFCL's (`multi_turn_base_0`). The host reads only data here (JSON files and the constants naming each
class's module); BFCL's API classes run in the jail, from the named Python environment `bfcl` (the tests' oracle,
tests/environments/bfcl_oracle.py, runs BFCL's own checker there too).

How a BFCL entry becomes a Task, following BFCL's own FC inference (model_handler/base_handler.py):
- turns: `question`, one ScriptedTurn per user turn. A miss_func entry's held-out turn has no message: BFCL then sends
  DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC and adds the held-out functions, which here is ScriptedTurn.add_tools.
- tools: every function documented for the involved classes (multi_turn_func_doc), converted to the OpenAI function
  format as BFCL's OpenAI handler does (types mapped as GORILLA_TO_OPENAPI: dict->object, float->number with
  format "float", tuple->array, any->string, unknown->string). `excluded_function` is kept in metadata only: BFCL's
  inference does not remove those functions either.
- classes: one ClassTools per involved class, `setup="_load_scenario"` with the class's initial_config and
  long_context as BFCL passes them (MathAPI, BFCL's one stateless class, gets no setup).
- checkers: one state checker whose reference is the ground truth, each call string (`cd(folder='document')`,
  positional `sort('final_report.pdf')`) parsed with `ast` into a ToolCall (positional arguments named in the order
  of the function's documented parameters).

What BFCL's multi-turn checker checks (eval_runner._evaluate_single_multi_turn_entry, multi_turn_checker.py), and
bfcl_check.py reproduces, in this order:
1. force-terminated: the model's turns are not as many as the ground truth's -> invalid.
2. Per turn, the model's calls and the ground truth's run on two instance sets that persist across turns (calls
   that raise give "Error during execution: ..." and go on). Empty decoded steps were dropped beforehand.
3. empty turn: the ground truth's turn has calls and the model's has none -> invalid
   ("multi_turn:empty_turn_model_response").
4. A turn whose ground truth is empty (the miss_func / miss_param turn where the model should ask) is not checked;
   the model's calls there still run, so later states and results include them.
5. state: for each involved class, every attribute of the ground truth instance not starting with '_' equals (==)
   the model instance's ("multi_turn:instance_state_mismatch"); attributes only the model instance has are ignored.
6. response: the ground truth's results of this turn are a sub-multiset (order ignored) of the model's results of
   all turns so far ("multi_turn:execution_response_mismatch").
The first failing turn decides. Not checked by BFCL v4 (present but unused in its code): the method invoke order
checker and multi_turn_irrelevance_checker; so a model calling tools in a turn whose ground truth is empty is not
failed for it. Ours differs only where JSON cannot carry Python's equality (see data/class_state.py): objects
compare by public attributes, not by their own __eq__ (BFCL's classes define __eq__ that way).
"""

from __future__ import annotations

import ast
import functools
import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from groupscore.environments.task import Checker, ClassTools, EpisodeLimits, ScriptedTurn, Task
from groupscore.schema.sessions import ToolCall

CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
PYTHON_ENV = "bfcl"
SETUP = "_load_scenario"
# Types of BFCL's function docs in JSON Schema (the facts of bfcl_eval.constants.type_mappings.GORILLA_TO_OPENAPI).
OPENAI_TYPES = {
    "integer": "integer", "number": "number", "float": "number", "double": "number", "string": "string",
    "boolean": "boolean", "bool": "boolean", "array": "array", "list": "array", "tuple": "array",
    "dict": "object", "object": "object", "any": "string",
}  # fmt: skip


def _data() -> Any:
    return resources.files("bfcl_eval") / "data"


def _read_jsonl(path: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@cache
def _backend() -> tuple[dict[str, str], dict[str, str], tuple[str, ...], str, str]:
    """BFCL's constants: class -> module, class -> function doc file, stateless classes, the held-out turn's prompt,
    the package's version. Plain data modules (nothing of the API classes is imported on the host)."""
    from importlib.metadata import version

    from bfcl_eval.constants import default_prompts
    from bfcl_eval.constants import executable_backend_config as backend

    return (
        dict(backend.CLASS_FILE_PATH_MAPPING),
        dict(backend.MULTI_TURN_FUNC_DOC_FILE_MAPPING),
        tuple(backend.STATELESS_CLASSES),
        default_prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
        version("bfcl-eval"),
    )


@cache
def function_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    """BFCL's function docs of one class, in its file's order."""
    return tuple(_read_jsonl(_data() / "multi_turn_func_doc" / _backend()[1][class_name]))


def _openai_property(prop: dict[str, Any]) -> dict[str, Any]:
    out = dict(prop)
    kind = prop.get("type")
    out["type"] = OPENAI_TYPES.get(kind, "string") if isinstance(kind, str) else "string"
    if kind == "float":  # as BFCL's OpenAI handler tells the model
        out["format"] = "float"
        out["description"] = prop.get("description", "") + " This is a float type value."
    if "properties" in prop:
        out["properties"] = {k: _openai_property(v) for k, v in prop["properties"].items()}
    if isinstance(prop.get("items"), dict):
        out["items"] = _openai_property(prop["items"])
    return out


def tool_schema(doc: dict[str, Any]) -> dict[str, Any]:
    """One BFCL function doc as an OpenAI function tool (its `response` schema is not part of the tool)."""
    params = doc.get("parameters", {})
    parameters = {
        "type": "object",
        "properties": {k: _openai_property(v) for k, v in params.get("properties", {}).items()},
        "required": list(params.get("required", [])),
    }
    return {
        "type": "function",
        "function": {"name": doc["name"], "description": doc.get("description", ""), "parameters": parameters},
    }


def parse_call(text: str, parameter_names: dict[str, list[str]]) -> ToolCall:
    """A ground truth call string (`mv(source='a', destination='b')`) as a ToolCall; positional arguments take the
    names of the function's documented parameters, in order."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a call of a named function: {text!r}")
    name = node.func.id
    arguments: dict[str, Any] = {}
    if node.args:
        names = parameter_names.get(name, [])
        if len(node.args) > len(names):
            raise ValueError(f"{text!r}: {len(node.args)} positional arguments, {name} documents {len(names)}")
        arguments.update({names[i]: ast.literal_eval(a) for i, a in enumerate(node.args)})
    for kw in node.keywords:
        if kw.arg is None:
            raise ValueError(f"{text!r}: **arguments are not a ground truth call")
        arguments[kw.arg] = ast.literal_eval(kw.value)
    return ToolCall(name=name, arguments=arguments)


def category_of(task_id: str) -> str:
    """`multi_turn_base_12` -> `multi_turn_base` (as BFCL splits it)."""
    return task_id.rsplit("_", 1)[0]


def _task(entry: dict[str, Any], ground_truth: list[list[str]]) -> Task:
    modules, _docs, stateless, added_prompt, bfcl_version = _backend()
    task_id = entry["id"]
    long_context = "long_context" in category_of(task_id)
    held_out: dict[str, list[str]] = entry.get("missed_function", {})
    classes, parameter_names = [], {}
    for class_name in entry["involved_classes"]:
        docs = function_docs(class_name)
        parameter_names.update({d["name"]: list(d["parameters"].get("properties", {})) for d in docs})
        stateful = class_name not in stateless
        classes.append(
            ClassTools(
                class_name=class_name,
                module=modules[class_name],
                python_env=PYTHON_ENV,
                setup=SETUP if stateful else None,
                setup_args=(
                    {"scenario": entry["initial_config"].get(class_name, {}), "long_context": long_context}
                    if stateful
                    else {}
                ),
                methods=tuple(d["name"] for d in docs),
                tool_schemas=tuple(tool_schema(d) for d in docs),
                encoder=_encoder(),
            )
        )
    turns = []
    for index, messages in enumerate(entry["question"]):
        added = tuple(held_out.get(str(index), ()))
        if added and not messages:
            messages = [{"role": "user", "content": added_prompt}]
        turns.append(ScriptedTurn(messages=tuple(messages), add_tools=added))
    reference = tuple(tuple(parse_call(c, parameter_names) for c in turn) for turn in ground_truth)
    if len(reference) != len(turns):
        raise ValueError(f"{task_id}: {len(turns)} turns but {len(reference)} ground truth turns")
    return Task(
        id=task_id,
        source="bfcl",
        turns=tuple(turns),
        classes=tuple(classes),
        checkers=(Checker(kind="state", name="bfcl_state", reference=reference, compare="bfcl"),),
        # BFCL lets a model take up to MAXIMUM_STEP_LIMIT (20) steps in each turn
        limits=EpisodeLimits(max_steps=20 * len(turns)),
        metadata={
            "source": "bfcl",
            "bfcl_version": bfcl_version,
            "category": category_of(task_id),
            "involved_classes": list(entry["involved_classes"]),
            "long_context": long_context,
            "ground_truth": ground_truth,
            "initial_config": entry["initial_config"],
            "missed_function": held_out,
            "excluded_function": entry.get("excluded_function", []),
            "path": entry.get("path", []),
        },
    )


@cache
def _category(category: str) -> tuple[Task, ...]:
    if category not in CATEGORIES:
        raise KeyError(f"unknown BFCL category {category!r}: one of {', '.join(CATEGORIES)}")
    entries = _read_jsonl(_data() / f"BFCL_v4_{category}.json")
    answer_file = _data() / "possible_answer" / f"BFCL_v4_{category}.json"
    answers = {a["id"]: a["ground_truth"] for a in _read_jsonl(answer_file)}
    return tuple(_task(e, answers[e["id"]]) for e in entries)


def load_bfcl(category_or_id: str | None = None) -> list[Task]:
    """Every task of a category (`multi_turn_base`), the one task of a BFCL id (`multi_turn_base_0`), or with None
    every task of the four categories."""
    if category_or_id is None:
        return [task for category in CATEGORIES for task in _category(category)]
    if category_or_id in CATEGORIES:
        return list(_category(category_or_id))
    category = category_of(category_or_id)
    if category not in CATEGORIES:
        raise KeyError(f"no BFCL multi-turn task {category_or_id!r}: categories {', '.join(CATEGORIES)}")
    found = [t for t in _category(category) if t.id == category_or_id]
    if not found:
        raise KeyError(f"no BFCL task {category_or_id!r} in {category}")
    return found


def bfcl_entry(task: Task) -> dict[str, Any]:
    """The BFCL test entry a task came from, as BFCL's checker takes it (id, initial_config, involved_classes)."""
    meta = task.metadata
    return {"id": task.id, "initial_config": meta["initial_config"], "involved_classes": meta["involved_classes"]}


def reference_trajectory(task: Task) -> list[list[dict[str, Any]]]:
    """The task's ground truth as a trajectory (its state checker's reference)."""
    checker = next(c for c in task.checkers if c.kind == "state")
    return [[call.model_dump() for call in turn] for turn in checker.reference]


@functools.cache
def _encoder() -> str:
    """The in-jail state and result encoding BFCL's check compares (data/class_state.py), as source."""
    return (Path(__file__).with_name("data") / "class_state.py").read_text(encoding="utf-8")
