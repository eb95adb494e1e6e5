"""Settings: takes the command line, the environment, config files, baselines and inline
ignores, gives one resolved Settings for the run (checked before any server is tried).
"""
