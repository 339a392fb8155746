"""The API adapter and the cache: talking to the API server, reading its objects into slim
records, and the store the informers keep. Depends on the core only."""
