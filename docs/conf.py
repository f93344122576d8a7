"""Sphinx configuration: the guide and the studies are Markdown (MyST); the API
reference is generated from the docstrings (autodoc, numpydoc sections by napoleon).

    pip install -e '.[docs]' && sphinx-build -W -b html docs docs/_build
"""

from monk_framework import __version__

project = "monk_framework"
author = "monk_framework developers"
release = __version__
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 4
myst_enable_extensions = ["dollarmath"]
napoleon_numpy_docstring = True
napoleon_google_docstring = False
autodoc_typehints = "none"  # the signatures carry the names; the docstrings say the types
autodoc_member_order = "bysource"
html_theme = "alabaster"
html_title = f"monk_framework {release}"
suppress_warnings = ["myst.header"]
