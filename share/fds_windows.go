package share

// CloseInherited does nothing: connection sharing does not run on Windows.
func CloseInherited() {}
