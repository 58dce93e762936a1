/* datadir.h: where einsora's data files (the catalog, the demo's fixture machines) are, found
 * at run time rather than compiled in from the source tree: an installed binary reads its
 * FHS data dir, a binary in a build folder reads the source tree it was built in. */
#pragma once

/* The folder holding catalog.yaml, first match of: $EINSORA_DATA_DIR; <exe>/../share/einsora
 * (an install moved as a whole); the configured <prefix>/share/einsora; the data/ folder of a
 * source tree above the executable or above the working folder. NULL when none holds it.
 * Found once per process. */
const char *data_dir(void);

/* The demo's fixture machines: <data dir>/demo/machines when installed, or the source tree's
 * tests/fixtures/machines. NULL when neither is there. */
const char *demo_fixtures_dir(void);
