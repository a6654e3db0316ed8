/*
 * coresig.h - names for the fatal signal a core file records: the
 * signal's own ("SIGSEGV"), its description as gdb gives it
 * ("Segmentation fault", the same on every system, unlike strsignal()'s
 * locale) and its si_code's ("SEGV_MAPERR").
 */
#ifndef SW_CORESIG_H
#define SW_CORESIG_H

/* "SIGSEGV"; NULL for a signal without a name here (real-time ones). */
const char *coresig_name(int sig);

/* "Segmentation fault"; NULL as coresig_name(). */
const char *coresig_text(int sig);

/* "SEGV_MAPERR", "SI_TKILL"; NULL for a code without a name here. */
const char *coresig_code_name(int sig, int code);

#endif /* SW_CORESIG_H */
