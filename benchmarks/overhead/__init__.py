"""Framework-overhead benchmark support: a trivial task and an instant canned model server."""
