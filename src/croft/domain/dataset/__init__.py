"""The dataset (docs/dataset.md): the row and its codec, fast read views, rotation and retention, skip
counts, the stats summary, the container profile, the /dataset HTTP rules, croft collect's transfer
plans and croft export's partitions."""
