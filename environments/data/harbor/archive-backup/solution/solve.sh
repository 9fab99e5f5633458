#!/bin/bash
cd /app
tar --exclude='*.log' --exclude='project/cache' -czf backup.tar.gz project
