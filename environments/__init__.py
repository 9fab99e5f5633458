"""Environments: multi-step tool-use episodes in the sandbox, scored from the state they leave.

    from groupscore.environments import Sessions, load_task
    sessions = Sessions()
    opening = sessions.reset(load_task("demo:count-errors"))          # messages, tools (OpenAI function format)
    obs = sessions.step(opening.session_id, ToolCall(name="shell", arguments={"command": "grep -c ' ERROR ' app.log"}))
    verdict = sessions.score(opening.session_id)                      # reward, status (infra_error masked), evidence
    sessions.close(opening.session_id)

A task (task.py) comes from a source (sources.py: groupscore's own JSONL/YAML, Harbor task directories, BFCL v4
multi-turn); a session (session.py) is its episode in a jail of its own (jails.py, the sandbox's session launcher);
checkers (checkers.py) score the state it leaves after the episode, in jails of their own.
"""

from __future__ import annotations

from groupscore.environments.replay import build_state, reference_record, replay
from groupscore.environments.sessions import SessionLimit, Sessions, UnknownSession
from groupscore.environments.sources import SourceError, load_source, load_task
from groupscore.environments.task import Checker, ClassTools, EpisodeLimits, Task
from groupscore.schema.sessions import Observation, Opening, ToolCall, Turn

__all__ = [
    "Checker",
    "ClassTools",
    "EpisodeLimits",
    "Observation",
    "Opening",
    "SessionLimit",
    "Sessions",
    "SourceError",
    "Task",
    "ToolCall",
    "Turn",
    "UnknownSession",
    "build_state",
    "load_source",
    "load_task",
    "reference_record",
    "replay",
]
