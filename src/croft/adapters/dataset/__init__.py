"""The dataset on disk and on the wire: the writer and its compressor thread, the disk port they write
through, zstd frames, path resolution and the readers (parallel scan, tail), the read-only /dataset
endpoint, croft collect's client and node copy, and the Parquet export."""
