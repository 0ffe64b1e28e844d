"""The dataset on disk and on the wire: the writer, the compressor, the readers, the /dataset endpoint and
collect's client and copier."""
