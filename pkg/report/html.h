/* The parts of `preflight report --html` (html.c: the verdict read and the page written;
 * html_page.c: the page's style and script). */
#ifndef PF_REPORT_HTML_H
#define PF_REPORT_HTML_H

extern const char pf_report_html_css[];
extern const char pf_report_html_js[];

#endif
