#include "plots/templates.h"

#include <string.h>

const char *sp_plot_template_text(const char *name)
{
    for (int i = 0; i < sp_plot_n_templates; i++)
        if (strcmp(sp_plot_templates[i].name, name) == 0)
            return sp_plot_templates[i].text;
    return NULL;
}
