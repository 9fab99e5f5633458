#!/usr/bin/env bash
# OpenRLHF with groupscore as its remote reward: OpenRLHF posts {query, prompts, labels} to --remote_rm_url and reads
# back rewards, scores and extra_logs. It sends no reward spec and no token, so the spec is the service's and the
# service listens where only the trainer reaches it.
set -euo pipefail

GROUPSCORE_OPENRLHF_REWARD='{"components": [{"name": "correct", "weight": 1.0}, {"name": "format", "weight": 0.2, "verifier": "format", "params": {"tags": ["think", "answer"]}}]}' \
  groupscore serve --host 127.0.0.1 --port 8000 &

python3 -m openrlhf.cli.train_ppo_ray \
  --pretrain Qwen/Qwen2.5-0.5B-Instruct \
  --prompt_data openai/gsm8k --input_key question --label_key answer --apply_chat_template \
  --remote_rm_url http://127.0.0.1:8000/get_reward \
  --advantage_estimator group_norm --n_samples_per_prompt 8 \
  --save_path ./checkpoint/gsm8k-grpo
