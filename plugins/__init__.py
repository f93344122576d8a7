"""Built-in kernels and estimators of monk_framework.

Installed as the package ``monk_plugins`` and registered, module by module, through
the entry-point group ``monk_framework.plugins``: the same path a third-party plugin
takes. The framework itself never imports this package.
"""
