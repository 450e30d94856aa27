"""Pure domain logic: no I/O, no imports from db, services, api or cli."""
