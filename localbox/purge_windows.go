package localbox

// PlanPurge refuses on Windows, where the local box does not run.
func PlanPurge(dir string, o PurgeOptions) (PurgePlan, error) { return PurgePlan{}, errWindows }

// Purge refuses on Windows, where the local box does not run.
func Purge(dir string, o PurgeOptions) (PurgePlan, error) { return PurgePlan{}, errWindows }

// PlanOrphans refuses on Windows, where the local box does not run.
func PlanOrphans(o PurgeOptions) (PurgePlan, error) { return PurgePlan{}, errWindows }

// PurgeOrphans refuses on Windows, where the local box does not run.
func PurgeOrphans(o PurgeOptions) (PurgePlan, error) { return PurgePlan{}, errWindows }
