"""Inside the jail (the `bfcl` Python environment): BFCL's own multi-turn checker on a batch of trajectories.

Reads oracle_in.json: {"entries": {task id: BFCL test entry}, "ground_truth": {task id: per-turn call strings},
"runs": [{"key", "task", "turns": [[{"name", "arguments"}, ...], ...]}]}; prints one JSON verdict a line:
{"key", "valid", "error_type", "error_message"}. Each call is decoded as BFCL decodes an FC model's call
(model_handler/utils.convert_to_function_call: name(k=repr(v),...)), one step per call, and the turn-count check of
eval_runner (force-terminated) comes first, as there.
"""

import json
import sys

from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker


def decoded(call):
    args = ",".join(f"{k}={v!r}" for k, v in call["arguments"].items())
    return f"{call['name']}({args})"


def verdict(run, entries, ground_truth, model_name):
    entry, truth = entries[run["task"]], ground_truth[run["task"]]
    turns = run["turns"]
    if len(turns) != len(truth):
        return {"valid": False, "error_type": "multi_turn:force_terminated", "error_message": "turn count"}
    steps = [[[decoded(c)] for c in turn] for turn in turns]
    result = multi_turn_checker(steps, truth, dict(entry), entry["id"].rsplit("_", 1)[0], model_name)
    return {
        "valid": bool(result["valid"]),
        "error_type": result.get("error_type"),
        "error_message": result.get("error_message"),
    }


def main():
    with open("oracle_in.json") as fh:
        job = json.load(fh)
    for i, run in enumerate(job["runs"]):
        # BFCL keeps instances in its module's globals, keyed by model name and task: a name of each run's own
        model_name = f"gsoracle{i}"
        try:
            out = verdict(run, job["entries"], job["ground_truth"], model_name)
        except Exception as exc:
            out = {"valid": None, "error_type": "oracle_error", "error_message": f"{type(exc).__name__}: {exc}"}
        for name in [n for n in vars(multi_turn_utils) if n.startswith(model_name + "_")]:
            del vars(multi_turn_utils)[name]  # the run's instances go with it (long contexts are large)
        print(json.dumps({"key": run["key"], **out}))
        sys.stdout.flush()


main()
