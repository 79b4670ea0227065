local function terminal(st) return st == 'completed' or st == 'failed' or st == 'cancelled' end
