SELECT word, count(*) AS n
FROM (SELECT explode(split(lower('the quick brown fox jumps over the lazy dog the end'), ' ')) AS word)
GROUP BY word
ORDER BY n DESC, word
LIMIT 3
