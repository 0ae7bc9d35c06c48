"""How a peer reaches Spark: its engines (Spark Connect servers at the share level) and the SQL workers on them."""
