/*
 * agent.h - what the agent's files share.
 */
#ifndef SW_AGENT_H
#define SW_AGENT_H

/* The dump signal the agent installed, or 0 while it has none. */
int agent_signal(void);

#endif /* SW_AGENT_H */
