"""Jobs on a peer: the Dispatcher and its JobMasters, their attempts' files, engines, Python environments, savepoints and reports, and the janitor that removes what they left."""
