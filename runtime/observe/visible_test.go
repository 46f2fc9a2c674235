package observe

import "testing"

func TestVisibleDevice(t *testing.T) {
	tests := []struct {
		env     string
		device  int
		index   int
		uuid    string
		wantErr bool
	}{
		{"", 0, 0, "", false},
		{"", 1, 1, "", false},
		{"1", 0, 1, "", false},
		{" 3 , 1 ", 1, 1, "", false},
		{"2,0", 0, 2, "", false},
		{"GPU-8f0c-aa", 0, 0, "GPU-8f0c-aa", false},
		{"1", 1, 0, "", true},
		{"x", 0, 0, "", true},
		{"-1", 0, 0, "", true},
	}
	for _, tc := range tests {
		index, uuid, err := visibleDevice(tc.env, tc.device)
		if (err != nil) != tc.wantErr {
			t.Errorf("visibleDevice(%q, %d): err %v, want error %v", tc.env, tc.device, err, tc.wantErr)
			continue
		}
		if err == nil && (index != tc.index || uuid != tc.uuid) {
			t.Errorf("visibleDevice(%q, %d) = %d %q, want %d %q", tc.env, tc.device, index, uuid, tc.index, tc.uuid)
		}
	}
}
