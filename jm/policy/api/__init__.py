"""Pure parts of the REST side: list pages and filters, the tenant of new work."""
