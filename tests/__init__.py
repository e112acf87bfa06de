"""The test suite: one folder per room of the library (tests/<room>/), and tests/project/ for checks on the
whole project. Every folder is a package, so two folders may hold test files of the same name; the shared
builders are imported as `from tests.helpers import ...`."""
