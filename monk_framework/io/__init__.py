"""Reading samples: data files (CSV, whitespace tables, ``.npy``, FASTA, one string a
line) and the bundled UCI splice-junction DNA. It needs only the interfaces below it, so
``import monk_framework`` offers ``load_sample`` and ``load_splice`` without the
application layer (the command line, jobs, experiments)."""
