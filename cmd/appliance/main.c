/* main.c: argument parsing and subcommand dispatch only. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return 0;
}
