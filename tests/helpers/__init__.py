"""The one set of test helpers: every module under tests/ that is not a test imports from here, and no
test module imports another (tests/unit/test_tests_layout.py checks both).

    cli          croft as a user runs it: `croft(*args)`, the console script CROFT
    rows         dataset rows: make_row (any row), seq_row (numbered), member_row (a cgroup's), polls
    dataset      a dataset directory read back with zstandard and the codec; numbered polls to write
    golden       byte-for-byte comparison of replayed output, failing with a unified diff
    snapshots    the collector's snapshots: proc, cgroup, poll, config, HEALTH
    strategies   hypothesis strategies for the row's value types
    scale        croft scale's observations, built as a live poll would see them
    spec_keys    the JSON keys of croft stats --json and croft profile, in order
    net          free_port on loopback
    collect      real collector processes (serve_dataset.py) and local reading for croft collect
    kube         the test control plane (kube-apiserver) and a stand-in collector /metrics server
    prometheus   a real Prometheus on loopback
    webapp       the experiment harness's webapp as a real process
    workload     processes in their own cgroup that burn CPU, write, allocate
    children     child processes with known syscalls; a GPU-like device node
    fake_kernel  the simulated kernel source the contract tests hold to the real programs'
    loaders      the loaders of croft's eBPF programs the kernel tests run on (CO-RE, BCC), opening one
    btf          the structs an eBPF object's BTF declares, read from its .BTF section
    nvml_fake    recorded NVML answers replayed
    faulty_disk  a Disk port that fails on cue (short writes, ENOSPC, EIO, rename failures)
    filesystems  a small real tmpfs, and filling it
    parquet      croft export's generated fleet, dataset files, and croft's answers as DuckDB/Spark SQL

Programs the tests start: dataset_driver.py (python -m), serve_dataset.py, hostile_server.py, odd_server.py,
cluster_exporter.py.
"""
