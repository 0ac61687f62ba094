package boxagent

import "syscall"

// lstat is path's stat data, without following a symlink.
func lstat(path string) (statData, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return statData{}, false
	}
	return statData{
		mode: st.Mode, size: st.Size,
		mtimeSec: int64(st.Mtim.Sec), mtimeNsec: int64(st.Mtim.Nsec),
		ctimeSec: int64(st.Ctim.Sec), ctimeNsec: int64(st.Ctim.Nsec),
		dev: uint64(st.Dev), ino: uint64(st.Ino), uid: uint64(st.Uid), gid: uint64(st.Gid),
	}, true
}
