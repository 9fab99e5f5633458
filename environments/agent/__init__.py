"""What runs inside a session's jail: the agent (main.py, the jail's pid 1), its tools (tools.py) and their processes
(procs.py, child.py), the state's packing and restoring (state.py), and the typed wire to the host (protocol.py).

Standard library only, and nothing of groupscore: the host binds this folder read-only into every session's jail and
the jail's own Python imports it from there (protocol.BOOT). The host imports protocol.py, and the tests import the
rest to check it directly.
"""
