package offload

// oNoFollow is 0: Windows has no O_NOFOLLOW, and offload refuses to run
// there (cli's platform check) before any file is opened.
const oNoFollow = 0
