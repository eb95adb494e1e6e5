from qadvisor.cli import main

main()
