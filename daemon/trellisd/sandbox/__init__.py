"""The walls around every program the daemon starts for a session: ``run_command``, a
turn's check, an MCP stdio server.

``walls`` says what they are (the mode, the network, what may be written, what is hidden)
and how a project may only make them stricter; ``bwrap`` builds them with bubblewrap and
sweeps what a program left on a protected path; ``limits`` bounds the processes a program
may run; ``doctor`` says what works on this machine; ``network`` is the proxy that lets only
a listed ``host:port`` through, ``relay`` its end inside the walls, ``landlock`` the
runner of the fallback where user namespaces are off, and ``landlock_walls`` what those
weaker walls are made of.

This package imports nothing: ``relay`` and ``landlock`` run as programs of their own
(``python -m``), the second before its walls are up, so importing the package must cost
nothing and run nothing. Import what you need from its modules.
"""
