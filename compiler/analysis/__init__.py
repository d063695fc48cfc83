"""Policy reasoning: exact analysis of rules (shadowing, satisfiability, overlap, witnesses)."""
