"""Stage lower: syntax trees and their resolution → the typed model (runtime/model/ir.py).

Runs only on a build whose names all resolved, so every reference has a symbol. Along the way
it checks what the grammar leaves open (H3): closed vocabularies with "did you mean", attributes
given twice, not allowed or missing, schemas and their constraints, regular expressions,
defaults, value ranges, ASK/DENY options, and wire names. Inside the stage every error is
collected; a build with errors gets no model.
"""

from harnessc.runtime.model import derive_wire_name

from .core import Lowered, module_name
from .program import lower_program

__all__ = ["Lowered", "derive_wire_name", "lower_program", "module_name"]
