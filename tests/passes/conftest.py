"""The per-pass tests run before the generated differential tests (which take minutes): a
pass broken by a mutant (`make mutation`) is then caught, with `-x`, by its own tests first."""

GENERATED = ("test_differential.py", "test_examples_differential.py")


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: item.path.name in GENERATED)
