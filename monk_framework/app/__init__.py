"""The application: the ``monkfw`` command line, jobs, writing files, data sets and
the paper's experiments. It builds on every layer below and nothing imports it except
the package's top-level API."""
