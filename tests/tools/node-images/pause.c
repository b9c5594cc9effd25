/*
 * The pod sandbox's "pause" process, like Kubernetes' own: it holds the pod's namespaces open
 * and, as PID 1 of a shared PID namespace, reaps orphaned children. Built by build.py with
 * `gcc -static -Os -s` so the image needs nothing else.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* As PID 1 the kernel delivers no signal without a handler, so TERM and INT need one to stop. */
static void die(int sig) {
	(void)sig;
	_exit(0);
}

/* One SIGCHLD may stand for several exited children: reap until none is left. */
static void reap(int sig) {
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void) {
	struct sigaction on_stop = {.sa_handler = die};
	struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};

	if (sigaction(SIGINT, &on_stop, NULL) < 0 || sigaction(SIGTERM, &on_stop, NULL) < 0 ||
	    sigaction(SIGCHLD, &on_child, NULL) < 0)
		return 1;

	for (;;)
		pause();
}
