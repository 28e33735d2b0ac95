"""``spark-submit`` scripts, one module per job."""
