"""OpenRLHF's reward file: `--remote_rm_url openrlhf_reward_func.py --label_key answer`.

OpenRLHF loads this file by path and calls `reward_func(queries, prompts, labels)`; the scoring service does the
rest. (With OpenRLHF's remote mode instead, point `--remote_rm_url` at http://HOST:8000/get_reward.)
"""

from groupscore.client.openrlhf import openrlhf_reward_func

reward_func = openrlhf_reward_func(
    "http://127.0.0.1:8000",
    verifier="math",  # the kind plain labels are scored with
    reward={
        "components": [
            {"name": "correct", "weight": 1.0},
            {"name": "format", "weight": 0.2, "verifier": "format", "params": {"tags": ["think", "answer"]}},
        ]
    },
)
