"""The dataset: the row and its codec, fast views, rotation and retention, skips, the stats summary, the
container profile, the /dataset HTTP rules and collect's transfer plans."""
