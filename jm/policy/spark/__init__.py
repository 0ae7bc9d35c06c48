"""Pure decisions about engines (Spark Connect servers): which one a piece of work uses, and why one died."""
