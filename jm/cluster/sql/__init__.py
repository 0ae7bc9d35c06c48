"""The SQL gateway and Livy's interactive sessions on a peer: the sessions it holds (sessionhost.py), and the roles on them (sessions, statements, completion, Livy)."""
