"""What a task folder needs beyond the `evoduet_graph.task.Task` contract.

`languages` is the table of program languages (suffix, code-fence tag, toolchain);
`settings` folds the task config's own settings (OpenEvolve's or SkyDiscover's
``config.yaml``) into the run configuration and says which it used; `environment` checks
that this machine has the task's Python requirements and toolchain.
"""
