/* plots/templates.h: the gnuplot templates plots/<name>.gp, compiled into the library as strings by
 * plots/embed_templates.sh (the build generates $(BUILD)/gen/plot_templates.c). */
#ifndef SP_PLOT_TEMPLATES_H
#define SP_PLOT_TEMPLATES_H

typedef struct {
    const char *name; /* the file name without .gp */
    const char *text;
} sp_plot_template;

extern const sp_plot_template sp_plot_templates[];
extern const int sp_plot_n_templates;

/* The text of template `name`, NULL when there is none. */
const char *sp_plot_template_text(const char *name);

#endif
