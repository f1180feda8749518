"""Built-in placement policies, one per module; importing this package registers them all by name.

``PLACEMENT_POLICIES`` imports this package on its first lookup (lazily). Every module of the
package is loaded, in name order, so a new policy is one new module (plus its test) and nothing else.
"""

import importlib
import pkgutil

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_mod}")
